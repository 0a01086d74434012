/* Threads for the compiled cores, on POSIX and Windows: start and join a thread, one
   lock and condition, and an atomic counter that workers take the next item from. */
#ifndef BPESTORE_THREADS_H
#define BPESTORE_THREADS_H

#include <stdint.h>
#ifdef _WIN32
#include <windows.h>
#include <process.h>
#else
#include <pthread.h>
#endif

/* The next value of an integer counter (returns the value before), shared by threads. */
#if defined(__GNUC__) || defined(__clang__)
#define TAKE(counter) __atomic_fetch_add((counter), 1, __ATOMIC_RELAXED)
#else
#define TAKE(counter) (sizeof(*(counter)) == 8 \
    ? (InterlockedIncrement64((volatile LONG64 *)(counter)) - 1) \
    : (InterlockedIncrement((volatile LONG *)(counter)) - 1))
#endif

#ifdef _WIN32
typedef HANDLE Thread;
typedef SRWLOCK Lock;
typedef CONDITION_VARIABLE Cond;
#define LOCK_INIT(l) InitializeSRWLock(l)
#define LOCK_FREE(l) ((void)0)
#define LOCK(l) AcquireSRWLockExclusive(l)
#define UNLOCK(l) ReleaseSRWLockExclusive(l)
#define COND_INIT(c) InitializeConditionVariable(c)
#define COND_FREE(c) ((void)0)
#define WAIT(c, l) SleepConditionVariableSRW((c), (l), INFINITE, 0)
#define WAKE_ALL(c) WakeAllConditionVariable(c)
/* A thread's entry point `name` that runs `run((type *)arg)`. */
#define THREAD_MAIN(name, run, type) \
    static unsigned __stdcall name(void *arg) { run((type *)arg); return 0; }
typedef unsigned(__stdcall *ThreadMain)(void *);
#else
typedef pthread_t Thread;
typedef pthread_mutex_t Lock;
typedef pthread_cond_t Cond;
#define LOCK_INIT(l) pthread_mutex_init((l), NULL)
#define LOCK_FREE(l) pthread_mutex_destroy(l)
#define LOCK(l) pthread_mutex_lock(l)
#define UNLOCK(l) pthread_mutex_unlock(l)
#define COND_INIT(c) pthread_cond_init((c), NULL)
#define COND_FREE(c) pthread_cond_destroy(c)
#define WAIT(c, l) pthread_cond_wait((c), (l))
#define WAKE_ALL(c) pthread_cond_broadcast(c)
#define THREAD_MAIN(name, run, type) \
    static void *name(void *arg) { run((type *)arg); return NULL; }
typedef void *(*ThreadMain)(void *);
#endif

/* A thread running main(arg): 1, or 0 where it could not be started (the caller then
   runs that share itself). */
static inline int
thread_start(Thread *t, ThreadMain main, void *arg)
{
#ifdef _WIN32
    uintptr_t h = _beginthreadex(NULL, 0, main, arg, 0, NULL);
    *t = (HANDLE)h;
    return h != 0;
#else
    return pthread_create(t, NULL, main, arg) == 0;
#endif
}

static inline void
thread_join(Thread t)
{
#ifdef _WIN32
    WaitForSingleObject(t, INFINITE);
    CloseHandle(t);
#else
    pthread_join(t, NULL);
#endif
}

#endif
