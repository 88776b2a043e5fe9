/* tests/guests/flood.S with 256 KiB: more than a pipe (64 KiB) and
 * khyve's output ring (64 KiB) hold, and quick on PVM's byte-per-exit
 * string I/O.  Expect: as flood.S. */
#define FLOOD_LEN 0x40000
#include "flood.S"
