#!/usr/bin/env python3
"""grade_vs_cs336.py: our r1-zero grader's table of cases against CS336's.

Runs CS336 assignment 5's cs336_alignment/drgrpo_grader.py (r1_zero_reward_fn,
fast mode) on every case of tests/unit/test_grade.c (using its last column
where it says drgrpo differs from us) and on the rollouts of
tests/fuzz/rewards/grader.jsonl (against rl-reward's scores, BIN/rl-reward),
and prints one line per case and a count of disagreements; exit 1 if any.

    python3 tests/gen/grade_vs_cs336.py PATH/TO/drgrpo_grader.py [BIN]

Needs sympy.  The grader imports math_verify and latex2sympy2_extended, which
fast mode never calls: when they are missing, empty stand-ins are used.  When
pylatexenc is missing too, a stand-in for latex2text that knows \\frac{a}{b},
\\text{} and \\mathrm{} is used, and the cases that reach it are checked
against that stand-in only (said on stderr).
"""
import importlib.util
import json
import os
import re
import subprocess
import sys
import types

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def stub(name, **attrs):
    m = types.ModuleType(name)
    m.__dict__.update(attrs)
    sys.modules[name] = m
    return m


def load_grader(path):
    for name in ("math_verify", "latex2sympy2_extended"):
        try:
            __import__(name)
        except ImportError:
            stub(name, ExprExtractionConfig=None, LatexExtractionConfig=None, parse=None,
                 verify=None, latex2sympy=None)
    try:
        import pylatexenc.latex2text  # noqa: F401
    except ImportError:
        print("pylatexenc missing: a stand-in for latex2text is used", file=sys.stderr)

        class LatexNodes2Text:
            def latex_to_text(self, s):
                for _ in range(5):
                    s = re.sub(r"\\frac\{([^{}]*)\}\{([^{}]*)\}", r"\1/\2", s)
                    s = re.sub(r"\\(text|mathrm)\{([^{}]*)\}", r"\2", s)
                return s.replace("\\sqrt", "√").replace("\\pi", "π").replace("\\cdot", "·")
        pkg = stub("pylatexenc")
        pkg.latex2text = stub("pylatexenc.latex2text", LatexNodes2Text=LatexNodes2Text)
    spec = importlib.util.spec_from_file_location("drgrpo_grader", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def c_string(s):
    return re.sub(r'\\(.)', lambda m: {"n": "\n", "\\": "\\", '"': '"'}[m.group(1)], s)


def table_cases():
    src = open(os.path.join(ROOT, "tests/unit/test_grade.c")).read()
    prefix = re.search(r'#define R\(a\) "((?:[^"\\]|\\.)*)" a "((?:[^"\\]|\\.)*)"', src)
    head, tail = c_string(prefix.group(1)), c_string(prefix.group(2))
    s = r'"((?:[^"\\]|\\.)*)"'
    for m in re.finditer(r'\{ (R\(' + s + r'\)|' + s + r'), ' + s + r', (\d), (\d), (SAME|\d) \}', src):
        comp = head + c_string(m.group(2)) + tail if m.group(2) is not None else c_string(m.group(3))
        answer = int(m.group(6)) if m.group(7) == "SAME" else int(m.group(7))
        yield comp, c_string(m.group(4)), int(m.group(5)), answer


def fuzz_cases(binary):
    path = os.path.join(ROOT, "tests/fuzz/rewards/grader.jsonl")
    out = subprocess.run([os.path.join(binary, "rl-reward"), path], check=True,
                         capture_output=True, text=True).stdout.splitlines()
    for line, scored in zip(open(path), out):
        o, r = json.loads(line), json.loads(scored)
        yield o["completion"], o["answer"], int(r["format_reward"]), int(r["answer_reward"])


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    g = load_grader(sys.argv[1])
    binary = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "bin")
    bad = n = 0
    for comp, truth, f, a in list(table_cases()) + list(fuzz_cases(binary)):
        r = g.r1_zero_reward_fn(comp, truth)
        same = (int(r["format_reward"]), int(r["answer_reward"])) == (f, a)
        bad += not same
        n += 1
        print("ok  " if same else "DIFF", repr(comp[-48:]), repr(truth[:24]), "cs336",
              int(r["format_reward"]), int(r["answer_reward"]), "expected", f, a)
    print(f"{n} cases, {bad} disagreements")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
