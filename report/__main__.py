"""`python -m report DIR`: the same as `llada-bench report DIR`."""

from report.cli import main

raise SystemExit(main())
