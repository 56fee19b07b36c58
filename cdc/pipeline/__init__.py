"""The pipeline as a whole, around the stages.

- `run` (with `run_stages`): the stages chained, each through the library call its own command makes,
  so each keeps its own lock and checkpoint.
- `verify` (with `checksum`, `verify_targets`): source and targets compared at a pinned position.
- `status` (with `probe`, `local`), `wait`, `init`: operator tools. They only read a state directory
  (and, where asked, the source server) and never advance a checkpoint, so they are safe to run next
  to every stage, from cron or a runbook.
"""
