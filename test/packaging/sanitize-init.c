/*
 * sanitize-init.c
 *		Preloaded after libasan by test/packaging/sanitize.sh into Debian's postgres, a
 *		binary without the sanitizers: what their runtimes need to start right
 *		there.
 *
 * bindtextdomain: ASan preloaded into a binary that is not instrumented
 * initializes at its first malloc.  In postgres that is in libgpg-error's
 * constructor (reached through libsystemd and libgcrypt), in bindtextdomain,
 * which holds libc's gettext lock (_nl_state_lock) while it allocates.  ASan's
 * initialization calls dlerror, which takes the same lock again: glibc refuses
 * (EDEADLK), then unlocks it, so the lock is released twice, and the next
 * bindtextdomain (that of postgres's main) waits on it forever: "postgres -V"
 * never returns.  This bindtextdomain initializes ASan first, with no lock
 * held, then calls libc's.
 *
 * __ubsan_default_options: UBSan initializes at its first report, and reads
 * UBSAN_OPTIONS from /proc/self/environ, which the postmaster has overwritten
 * by then with its ps title: the report went to stderr, with no stack, and
 * ended the backend with exit status 1 (which the postmaster takes for a normal
 * exit).  UBSan asks this hook first; getenv reads the copy of the environment
 * that the postmaster made before it overwrote the original.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <libintl.h>
#include <stdlib.h>

/* libasan's, which is preloaded first. */
extern void __asan_init(void);
extern const char *__ubsan_default_options(void);

char *
bindtextdomain(const char *domainname, const char *dirname)
{
	static char *(*libc_bindtextdomain) (const char *, const char *);

	if (libc_bindtextdomain == NULL)
	{
		__asan_init();
		libc_bindtextdomain = (char *(*) (const char *, const char *))
			dlsym(RTLD_NEXT, "bindtextdomain");
	}
	return libc_bindtextdomain(domainname, dirname);
}

const char *
__ubsan_default_options(void)
{
	const char *options = getenv("UBSAN_OPTIONS");

	return options ? options : "";
}
