#!/usr/bin/env bash
# Checks that every tracked C++ file is formatted as .clang-format says (Debian 12's clang-format 14:
# other versions format some constructs differently). Exits 1 listing the files that differ.
#   bash scripts/check_format.sh          # check (CI)
#   bash scripts/check_format.sh --fix    # reformat those files in place
set -euo pipefail
cd "$(dirname "$0")/.."
CLANG_FORMAT="${CLANG_FORMAT:-clang-format}"
command -v "$CLANG_FORMAT" >/dev/null || { echo "check_format: $CLANG_FORMAT not found" >&2; exit 2; }
mapfile -t files < <(git ls-files -- '*.c' '*.cc' '*.cpp' '*.h' '*.hpp')
if [ "${1:-}" = "--fix" ]; then
  printf '%s\0' "${files[@]}" | xargs -0 -n 32 -P 2 "$CLANG_FORMAT" -i
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  "$CLANG_FORMAT" "$f" | cmp -s - "$f" || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "check_format: ${#bad[@]} of ${#files[@]} files differ from clang-format ($("$CLANG_FORMAT" --version)):"
  printf '  %s\n' "${bad[@]}"
  echo "fix with: bash scripts/check_format.sh --fix"
  exit 1
fi
echo "check_format: ${#files[@]} files formatted"
