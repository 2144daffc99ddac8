"""When the scheduler tick should sweep (filled in by the sweeper issue)."""


def sweep_if_due() -> None:
    return None
