#!/usr/bin/env bash
# readme_commands.sh - runs the README's commands exactly as written: every line of every
# ```sh block, from the repository's root, in order (a line ending in a backslash continues on
# the next). Blocks fenced without `sh` show commands with placeholder files and are not run;
# `bash scripts/test.sh` is left out, as it would run this test again. BUILD_DIR names this
# build's folder to the scripts, which build there (a no-op when it is up to date).
set -u
SRC=$1
export BUILD_DIR=$2
cd "$SRC" || exit 1
mapfile -t COMMANDS < <(python3 - README.md <<'PY'
import sys
lines, block, pending = open(sys.argv[1]).read().splitlines(), False, ""
for line in lines:
    if line.startswith("```"):
        block = line.strip() == "```sh"
        continue
    if not block or not line.strip() or line.lstrip().startswith("#"):
        continue
    if line.endswith("\\"):
        pending += line[:-1]
        continue
    print(pending + line)
    pending = ""
PY
)
[[ ${#COMMANDS[@]} -gt 0 ]] || { echo "FAIL  no \`\`\`sh block in README.md"; exit 1; }
passed=0
failed=0
for command in "${COMMANDS[@]}"; do
  if [[ $command == *"scripts/test.sh"* ]]; then
    echo "skip  $command (the test suite itself)"
    continue
  fi
  if out=$(bash -c "$command" 2>&1); then
    echo "ok    $command"
    passed=$((passed + 1))
  else
    echo "FAIL  $command (exit $?):"
    printf '%s\n' "$out" | tail -20 | sed 's/^/      /'
    failed=$((failed + 1))
  fi
done
echo "$passed passed, $failed failed"
[[ $passed -gt 0 && $failed -eq 0 ]]
