"""Reads a JUnit XML file as CI systems do, for crates/cli/tests/report.rs (run with the venv of
scripts/junit-tools): validates it against every junit-10.xsd given (xmlschema), then parses it with
junitparser and prints what a consumer sees, as JSON: each suite's counts and each case's result.

usage: junit_check.py REPORT.xml XSD...
"""

import json
import sys

import junitparser
import xmlschema


def main() -> int:
    report, xsds = sys.argv[1], sys.argv[2:]
    if not xsds:
        print("no XSD given", file=sys.stderr)
        return 2
    for xsd in xsds:
        schema = xmlschema.XMLSchema(xsd)
        errors = [str(e) for e in schema.iter_errors(report)]
        if errors:
            print(json.dumps({"invalid": xsd, "errors": errors[:5]}))
            return 1
    xml = junitparser.JUnitXml.fromfile(report)
    suites = []
    for suite in xml:
        cases = []
        for case in suite:
            results = [
                {"kind": type(r).__name__.lower(), "type": r.type, "message": r.message, "text": r.text}
                for r in case.result
            ]
            cases.append(
                {
                    "name": case.name,
                    "classname": case.classname,
                    "results": results,
                    "system_out": case.system_out,
                }
            )
        suites.append(
            {
                "name": suite.name,
                "tests": suite.tests,
                "failures": suite.failures,
                "errors": suite.errors,
                "skipped": suite.skipped,
                "properties": {p.name: p.value for p in suite.properties()},
                "cases": cases,
            }
        )
    print(json.dumps({"suites": suites}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
