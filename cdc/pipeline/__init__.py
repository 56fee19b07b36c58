"""Operator tools around the pipeline: `cdc status`, `cdc wait`, `cdc init`.

They only read a state directory (and, where asked, the source server); they never advance a
checkpoint, so they are safe to run next to every stage, from cron or a runbook.
"""
