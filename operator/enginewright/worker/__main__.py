from enginewright.worker.job import main

raise SystemExit(main())
