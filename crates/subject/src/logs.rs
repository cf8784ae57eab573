//! llama.cpp's global log callback, silenced once per process (every handle-creating module
//! calls [`quiet_logs`] first; a module of its own so none of them depends on another for it).

use crate::compat as sys;
use std::sync::Once;

/// llama.cpp logs through a global callback; the samplers only log warnings we surface as
/// errors ourselves, so its output is dropped to keep stdout and stderr deterministic.
pub(crate) fn quiet_logs() {
    static ONCE: Once = Once::new();
    unsafe extern "C" fn drop_log(
        _level: sys::ggml_log_level,
        _text: *const std::os::raw::c_char,
        _data: *mut std::ffi::c_void,
    ) {
    }
    // SAFETY: installs a callback that ignores its arguments; it never unwinds.
    ONCE.call_once(|| unsafe { ffi!(sys::llama_log_set(Some(drop_log), std::ptr::null_mut())) });
}
