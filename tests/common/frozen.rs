//! Work on a runtime of its own thread, which a test freezes and thaws: blocking that thread
//! stops the work's tasks, timers and connections at once, as a paused process's.

use std::future::Future;

/// Work running on its own thread and runtime until frozen ([`freeze`](Self::freeze)).
pub struct FrozenThread<T> {
    freeze: Option<tokio::sync::oneshot::Sender<()>>,
    frozen: Option<tokio::sync::oneshot::Receiver<()>>,
    thaw: std::sync::mpsc::Sender<()>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: std::thread::JoinHandle<Option<T>>,
}

impl<T: Send + 'static> FrozenThread<T> {
    /// Starts `work` on a thread of its own, with a current-thread runtime.
    pub fn spawn<F, Fut>(work: F) -> Self
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = T> + 'static,
    {
        let (freeze, freeze_now) = tokio::sync::oneshot::channel::<()>();
        let (frozen_tx, frozen) = tokio::sync::oneshot::channel::<()>();
        let (thaw, thawed) = std::sync::mpsc::channel::<()>();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.spawn(async move {
                if freeze_now.await.is_ok() {
                    let _ = frozen_tx.send(());
                    // Blocks the runtime's only thread until thawed.
                    let _ = thawed.recv();
                }
            });
            runtime.block_on(async move {
                tokio::select! {
                    done = work() => Some(done),
                    _ = stopped => None,
                }
            })
        });
        Self {
            freeze: Some(freeze),
            frozen: Some(frozen),
            thaw,
            stop: Some(stop),
            thread,
        }
    }

    /// Blocks the work's thread; returns once it is blocked.
    pub async fn freeze(&mut self) {
        let (Some(freeze), Some(frozen)) = (self.freeze.take(), self.frozen.take()) else {
            panic!("frozen twice");
        };
        freeze.send(()).unwrap();
        frozen.await.unwrap();
    }

    /// Lets the work's thread run again.
    pub fn thaw(&self) {
        let _ = self.thaw.send(());
    }

    /// Thaws the work, and waits for it to finish.
    pub async fn join(self) -> T {
        self.thaw();
        let thread = self.thread;
        tokio::task::spawn_blocking(move || thread.join().unwrap())
            .await
            .unwrap()
            .expect("the work was stopped")
    }

    /// Thaws the work and ends it where it is (its runtime shuts down).
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.thaw();
        let thread = self.thread;
        tokio::task::spawn_blocking(move || thread.join().unwrap())
            .await
            .unwrap();
    }
}
