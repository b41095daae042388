module enginewright.test/promlint

go 1.22

require github.com/prometheus/client_golang v1.22.0
