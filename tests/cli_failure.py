"""Shared by the CLI error tests: run a command that must fail and check its message."""
import os
import shutil
import subprocess


def expect_failure(name, argv, expected):
    """True if argv exits non-zero with every string of `expected` in its stderr; prints a line."""
    r = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    missing = [e for e in expected if e not in r.stderr]
    ok = r.returncode != 0 and not missing
    msg = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "<no stderr>"
    print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {r.returncode}: {msg}")
    if missing:
        print(f"     missing from the message: {missing}")
    return ok


def broken_copy_generate(moeserve, base, work, name, breaker, expected, extra=()):
    """Copies checkpoint `base` to work/name, lets `breaker` damage it, and expects
    `moeserve generate` on it to fail with the `expected` message parts."""
    folder = os.path.join(work, name)
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(base, folder)
    breaker(folder)
    return expect_failure(name, [moeserve, "generate", "--model", folder, "--prompt-ids", "1,2,3",
                                 "--max-tokens", "2", *extra], expected)
