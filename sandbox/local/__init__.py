"""The local backend: jailed subprocesses of this machine, their fork server, uids, cgroups and
what a run may leave on the host."""
