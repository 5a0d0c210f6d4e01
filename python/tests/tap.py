"""Run the binding's pytest suite and print TAP on stdout (for automake's
tap-driver: tests/test_python.sh).  pytest's own report goes to stderr,
which ends up in the test's log."""

import os
import sys

import pytest


class Tap:
    def __init__(self, out):
        self.out = out
        self.n = 0

    def line(self, s):
        self.out.write(s + "\n")
        self.out.flush()

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or (report.when == "setup" and not report.passed) or (
                report.when == "teardown" and report.failed):
            self.n += 1
            name = report.nodeid.replace("#", "")
            if report.skipped:
                reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else "skipped"
                self.line(f"ok {self.n} - {name} # SKIP {reason[9:] if reason.startswith('Skipped: ') else reason}")
            elif report.passed:
                self.line(f"ok {self.n} - {name}")
            else:
                self.line(f"not ok {self.n} - {name} ({report.when})")
                for ln in str(report.longreprtext).splitlines()[-40:]:
                    self.line("# " + ln)
                for title, text in report.sections:
                    if "stdout" in title:
                        for ln in text.splitlines():
                            self.line(f"# {title}: {ln}")


    def pytest_collectreport(self, report):
        # a module skipped as a whole (PyTorch absent): one SKIP line for it
        if report.skipped:
            self.n += 1
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else "skipped"
            reason = reason[9:] if reason.startswith("Skipped: ") else reason
            self.line(f"ok {self.n} - {report.nodeid} # SKIP {reason}")
        elif report.failed:
            self.n += 1
            self.line(f"not ok {self.n} - {report.nodeid} (collection)")
            for ln in str(report.longreprtext).splitlines()[-40:]:
                self.line("# " + ln)


def main():
    out = os.fdopen(os.dup(1), "w")
    sys.stdout.flush()
    os.dup2(2, 1)  # pytest's terminal output to stderr
    tap = Tap(out)
    seed = os.environ.get("LOCKSTEP_TEST_SEED", "20261128")
    tap.line(f"# seed {seed} (set LOCKSTEP_TEST_SEED to change it)")
    here = os.path.dirname(os.path.abspath(__file__))
    rc = pytest.main(["-p", "no:cacheprovider", "-q", "-rs", here] + sys.argv[1:],
                     plugins=[tap])
    if tap.n == 0:
        tap.line(f"Bail out! pytest ran no test (exit status {int(rc)})")
    tap.line(f"1..{tap.n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
