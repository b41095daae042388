// promlint: lint Prometheus text exposition on stdin, as client_golang's promlint does.
package main

import (
	"fmt"
	"os"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

func main() {
	problems, err := promlint.New(os.Stdin).Lint()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for _, p := range problems {
		fmt.Printf("%s: %s\n", p.Metric, p.Text)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
}
