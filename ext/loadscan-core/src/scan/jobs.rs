//! The work queue of a walk: jobs (for the walker, directories to list) run to completion on
//! up to N scoped threads, the calling one included. Knows nothing of directories.

use std::sync::{Condvar, Mutex};

/// The queue shared by the workers: pending jobs and how many are being worked on.
struct Queue<J> {
    jobs: Vec<J>,
    busy: usize,
}

/// Runs the jobs (and the jobs `run_one` finds) to completion on up to `threads` threads, the
/// calling one included. A thread that cannot be started (a process or pids limit) is simply
/// not there: the others, down to the calling thread alone, do the work. `run_one` must not
/// panic (the walker catches a job's panic itself); the queue's count of busy workers is kept
/// right either way, so no worker waits forever. Should a worker die anyway, its outputs are
/// replaced by `lost()`.
pub(super) fn run_queue<J: Send, O: Send>(
    initial: Vec<J>,
    threads: usize,
    run_one: &(dyn Fn(J) -> (O, Vec<J>) + Sync),
    lost: &dyn Fn() -> Vec<O>,
) -> Vec<O> {
    let threads = threads.max(1);
    if threads == 1 {
        let mut stack = initial;
        let mut outs = Vec::new();
        while let Some(job) = stack.pop() {
            let (out, more) = run_one(job);
            outs.push(out);
            stack.extend(more);
        }
        return outs;
    }
    let queue = Mutex::new(Queue { jobs: initial, busy: 0 });
    let ready = Condvar::new();
    let worker = || {
        let mut outs = Vec::new();
        loop {
            let job = {
                let mut q = queue.lock().unwrap_or_else(|p| p.into_inner());
                loop {
                    if let Some(job) = q.jobs.pop() {
                        q.busy += 1;
                        break Some(job);
                    }
                    if q.busy == 0 {
                        break None;
                    }
                    q = ready.wait(q).unwrap_or_else(|p| p.into_inner());
                }
            };
            let Some(job) = job else {
                ready.notify_all();
                return outs;
            };
            let (out, more) = run_one(job);
            outs.push(out);
            let mut q = queue.lock().unwrap_or_else(|p| p.into_inner());
            q.busy -= 1;
            let wake = !more.is_empty() || q.busy == 0;
            q.jobs.extend(more);
            drop(q);
            if wake {
                ready.notify_all();
            }
        }
    };
    std::thread::scope(|s| {
        let mut handles = Vec::with_capacity(threads - 1);
        for _ in 1..threads {
            match std::thread::Builder::new().spawn_scoped(s, worker) {
                Ok(h) => handles.push(h),
                Err(_) => break,
            }
        }
        let mut outs = worker();
        for h in handles {
            match h.join() {
                Ok(part) => outs.extend(part),
                Err(_) => outs.extend(lost()),
            }
        }
        outs
    })
}
