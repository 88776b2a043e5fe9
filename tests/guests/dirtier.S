/* The ticker (ticker.S) dirtying 16 MiB between two ticks, as fast as it
 * runs: for tests/snapshot/migrate's auto-converge (a guest that dirties
 * memory faster than a migration moves it). */
#define DIRTY_PAGES 4096
#include "ticker.S"
