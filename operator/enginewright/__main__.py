from enginewright.cli import main

raise SystemExit(main())
