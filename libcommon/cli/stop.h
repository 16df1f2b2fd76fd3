/* stop.h: ask a long run to stop at its next boundary.  After
 * lm_stop_on_signal(), the first SIGINT or SIGTERM only sets the flag to the
 * signal's number (the run saves its work and exits 128 + that number); a
 * second one ends the program at once, through the handlers lm_init()
 * installed (unfinished output files removed). */
#ifndef LMPIPE_STOP_H
#define LMPIPE_STOP_H

#include <signal.h>

/* Set to SIGINT or SIGTERM by the first of them; 0 until then. */
extern volatile sig_atomic_t lm_stop_signal;

/* Install the handlers (call after lm_init). */
void lm_stop_on_signal(void);

#endif
