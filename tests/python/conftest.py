"""pytest's hooks for the Python package's tests: a run in which some tests were skipped did not
check everything, so it ends with ctest's skip status (77) instead of 0, after pytest's summary
of what was skipped and why (-rs); a failure still ends as a failure."""

SKIP = 77


def pytest_sessionfinish(session, exitstatus):
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = len(reporter.stats.get("skipped", [])) if reporter else 0
    if exitstatus == 0 and skipped:
        session.exitstatus = SKIP


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    skipped = terminalreporter.stats.get("skipped", [])
    if skipped:
        reasons = sorted({str(r.longrepr[2]).replace("Skipped: ", "") if isinstance(
            r.longrepr, tuple) else "?" for r in skipped})
        terminalreporter.write_line("SKIP: %d of the package's tests did not run: %s"
                                    % (len(skipped), "; ".join(reasons)))
