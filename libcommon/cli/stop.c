/* stop.c: the first SIGINT/SIGTERM asks for a stop, the second one kills
 * (see stop.h). */
#define _POSIX_C_SOURCE 200809L
#include "cli/stop.h"

#include <string.h>

volatile sig_atomic_t lm_stop_signal;

static struct sigaction previous_int, previous_term;

static void on_stop(int sig)
{
	lm_stop_signal = sig;
	/* The next one goes to lm_init's handler: clean up and die. */
	sigaction(sig, sig == SIGINT ? &previous_int : &previous_term, NULL);
}

void lm_stop_on_signal(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_stop;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &previous_int);
	sigaction(SIGTERM, &sa, &previous_term);
}
