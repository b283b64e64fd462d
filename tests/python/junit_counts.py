"""What junitparser, the JUnit reader many CI integrations use, makes of a report.

Prints one JSON object: the totals junitparser computes over every suite, and each
failed test case as [classname, name, message]. The Rust tests compare these with
what the run decided, so a failure CI could not see fails a test.
"""

import json
import sys

from junitparser import Failure, Error, JUnitXml

xml = JUnitXml.fromfile(sys.argv[1])
tests = failures = errors = skipped = 0
failed = []
for suite in xml:
    for case in suite:
        tests += 1
        for result in case.result:
            if isinstance(result, Failure):
                failures += 1
                failed.append([case.classname, case.name, result.message])
            elif isinstance(result, Error):
                errors += 1
            else:
                skipped += 1
print(json.dumps({"tests": tests, "failures": failures, "errors": errors, "skipped": skipped, "failed": failed}))
