# Shared helpers of the graphics tests (tests/graphics/run, tests/lab/graphics):
# screenshots through the project's VNC client and OCR with Debian's
# tesseract-ocr.  Source it; it uses $top.

# gfx_vncshot ARGS...: the project's VNC test client (VNCSHOT overrides).
gfx_vncshot() {
	"${VNCSHOT:-$top/build/tests/vncshot}" "$@"
}

# gfx_ocr PNG: the text tesseract reads from PNG (cached in PNG.txt).
gfx_ocr() {
	[ -s "$1.txt" ] || tesseract "$1" - >"$1.txt" 2>/dev/null || : >"$1.txt"
	cat "$1.txt"
}

# gfx_has PNG ERE: the OCR text of PNG matches the extended regular
# expression ERE (case-insensitive; OCR spacing collapsed).
gfx_has() {
	[ -s "$1" ] || return 1
	gfx_ocr "$1" | tr -s ' \t' ' ' | grep -Eqi -- "$2"
}

# gfx_text PNG: the OCR text on one line (for PASS/FAIL messages).
gfx_text() {
	gfx_ocr "$1" | tr -s ' \t\n' ' ' | cut -c1-160
}

# gfx_khyve_has SLOT-DEVICE: khyve's -s help lists the device.
gfx_khyve_has() {
	"$khyve" -s help 2>&1 | awk '{ print $1 }' | grep -qx -- "$1"
}
