"""Run the package's tests (unittest) and print TAP: one "ok - ..." / "not ok - ..." line per
test and per subtest.  Makes a fresh database (HC_PY_DB, default hc_py) with holdcommit and
the roles the tests use on the server of PGHOST/PGPORT/PGUSER (a superuser), and drops them
after.  Exits 0 when every test passed.

    python tests/run.py [PATTERN]      # PATTERN: test_*.py by default
"""
import os
import sys
import time
import traceback
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import support  # noqa: E402


class TapResult(unittest.TestResult):
    def __init__(self):
        super().__init__()
        self.count = 0

    @staticmethod
    def name(test, subtest=None):
        module = type(test).__module__.removeprefix("test_")
        method = test._testMethodName.removeprefix("test_").replace("_", " ")
        doc = test.shortDescription()
        label = f"{module}: {doc or method}"
        if subtest is not None:
            parts = [] if subtest._message is unittest.case._subtest_msg_sentinel else [str(subtest._message)]
            parts += [f"{k}={v!r}" for k, v in subtest.params.items()]
            label += f" [{', '.join(parts)}]"
        return label

    def emit(self, ok, label, err=None):
        self.count += 1
        print(f"{'ok' if ok else 'not ok'} - {label}", flush=True)
        if err is not None:
            for line in "".join(traceback.format_exception(*err)).rstrip().splitlines()[-12:]:
                print(f"#   {line}", flush=True)

    def addSuccess(self, test):
        super().addSuccess(test)
        self.emit(True, self.name(test))

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.emit(False, self.name(test), err)

    def addError(self, test, err):
        super().addError(test, err)
        name = self.name(test) if isinstance(test, unittest.TestCase) else str(test)
        self.emit(False, name, err)

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.emit(True, f"{self.name(test)} # SKIP {reason}")

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is None:
            self.emit(True, self.name(test, subtest))
        else:
            self.emit(False, self.name(test, subtest), err)


def main():
    pattern = sys.argv[1] if len(sys.argv) > 1 else "test_*.py"
    here = os.path.dirname(os.path.abspath(__file__))
    support.create_database()
    start = time.monotonic()
    try:
        suite = unittest.defaultTestLoader.discover(here, pattern=pattern, top_level_dir=here)
        result = TapResult()
        suite.run(result)
    finally:
        support.drop_database()
    print(f"1..{result.count}")
    print(f"# {result.testsRun} tests, {len(result.failures)} failed, {len(result.errors)} errors,"
          f" {time.monotonic() - start:.1f} s")
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
