//! The layers against a real Redis: several instances in this process (`layers`), and worker
//! processes under load (`processes`). One test binary, each file a module.

mod layers;
mod processes;
