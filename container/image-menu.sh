#!/usr/bin/env bash
# Print the image's justfile: the project justfile less the recipes that cannot work inside the image, so
# that `just` there lists only what runs there. install-stack.sh writes it at build time to
# container/image.justfile, which the image's JUST_JUSTFILE names. The kept recipes are copied whole (doc,
# attributes, body), so the image's menu cannot drift from the project's. One attribute is added: every
# kept recipe but those in IN_PROJECT runs in the caller's directory (`[no-cd]`), so that
# `apptainer run llada.sif just sweep` writes ./artifacts/<sweep> where it was typed (the image is
# read-only); IN_PROJECT run the image's own tests and menu, in /opt/llada-bench (JUST_WORKING_DIRECTORY).
#   image-menu.sh [JUSTFILE]   (default: the project's justfile)
#
# Left out: whatever needs the internet (download, lock, test-latest, gpu-bundle), a scheduler or another
# engine (accre, ray-submit, image-*), a checkout (h200-results, train-miniature and campaign write into the
# project directory, which is read-only under Apptainer), or the host's Python (bench).
set -euo pipefail

IN_IMAGE="default sweep figures plan verify roofline env calibrate test test-gpu profile-decode"
IN_PROJECT="default test test-gpu profile-decode"
JUSTFILE="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/justfile}"

# Blocks are separated by blank lines; a block that defines a recipe (a line `name ...:` that is not a
# comment, an attribute or an assignment) is kept when its name is in IN_IMAGE; settings and variables are kept.
awk -v keep="$IN_IMAGE" -v project="$IN_PROJECT" '
    BEGIN {
        RS = ""; ORS = "\n\n"
        n = split(keep, names, " "); for (i = 1; i <= n; i++) wanted[names[i]] = 1
        n = split(project, names, " "); for (i = 1; i <= n; i++) in_project[names[i]] = 1
    }
    {
        lines = split($0, line, "\n"); name = ""; at = 0
        for (i = 1; i <= lines; i++) {
            if (line[i] ~ /^[A-Za-z_][A-Za-z0-9_-]*( [^:]*)?:([^=]|$)/) { split(line[i], word, /[ :]/); name = word[1]; at = i; break }
        }
        if (name != "" && !(name in wanted)) next
        found[name] = 1
        if (name == "" || name in in_project) { print; next }
        block = ""
        for (i = 1; i <= lines; i++) block = block (i == at ? "[no-cd]\n" : "") line[i] (i < lines ? "\n" : "")
        print block
    }
    END { for (w in wanted) if (!(w in found)) { print "image-menu: no recipe " w " in the justfile" > "/dev/stderr"; exit 1 } }
' "$JUSTFILE"
