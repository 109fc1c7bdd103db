"""ok / not ok lines for the Python checks that make test counts (the twin of test/harness/tap.bash)."""

failures = 0


def check(what, got, want):
    """Print "ok - WHAT", or "not ok - WHAT" with both values; count the failures."""
    global failures
    if got == want:
        print(f"ok - {what}", flush=True)
    else:
        failures += 1
        print(f"not ok - {what}", flush=True)
        print(f"#   got: {got!r}", flush=True)
        print(f"#   expected: {want!r}", flush=True)
