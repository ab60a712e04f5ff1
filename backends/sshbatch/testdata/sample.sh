# gridsub-batch v1 b3369136a48dddc1 3
printf '#gridsub-job b3369136a48dddc1 0\n' || exit 1; printf '#gridsub-job b3369136a48dddc1 0\n' >&2
sh -c 'cat; echo "args:$#:$1"; exit 0' x '$(touch owned) ; rm -rf ~ '\''q'\'' "d" \ * ~ # GRIDSUB_STDIN_0' <<'GRIDSUB_STDIN_0_1'
line one
GRIDSUB_STDIN_0
$(touch owned)
GRIDSUB_STDIN_0_1
r=$?; printf '\n#gridsub-rc b3369136a48dddc1 0 %d\n' "$r"; printf '\n#gridsub-rc b3369136a48dddc1 0 %d\n' "$r" >&2
printf '#gridsub-job b3369136a48dddc1 1\n' || exit 1; printf '#gridsub-job b3369136a48dddc1 1\n' >&2
sh -c 'echo refused >&2; exit 3' </dev/null
r=$?; printf '\n#gridsub-rc b3369136a48dddc1 1 %d\n' "$r"; printf '\n#gridsub-rc b3369136a48dddc1 1 %d\n' "$r" >&2
printf '#gridsub-job b3369136a48dddc1 2\n' || exit 1; printf '#gridsub-job b3369136a48dddc1 2\n' >&2
printf %s 'no newline at the end' </dev/null
r=$?; printf '\n#gridsub-rc b3369136a48dddc1 2 %d\n' "$r"; printf '\n#gridsub-rc b3369136a48dddc1 2 %d\n' "$r" >&2
