//! Samplers written in Rust, plugged into llama.cpp through its public custom-sampler
//! interface (`llama_sampler_i` + `llama_sampler_init`).
//!
//! The audits use these as planted controls: a known-bad and a known-good implementation of a
//! property (a clone that forgets its state and one that keeps it, a truncator that trusts the
//! `sorted` flag and one that does not) that run through the same chains, the same wrapper
//! and the same detectors as llama.cpp's own samplers. This module is plumbing only: the
//! sampling logic lives in the implementations of [`CustomSampler`].
//!
//! A panic inside a callback aborts the process instead of unwinding into C.

use crate::compat as sys;
use crate::graph::{GraphInputs, GraphOps};
use crate::sampler::Sampler;
use anyhow::Result;
use oracle::TokenId;
use std::any::Any;
use std::ffi::CStr;
use std::os::raw::c_char;
#[cfg(llama_fn = "llama_sampler_init")]
use std::os::raw::c_void;
use std::sync::OnceLock;

/// A sampler implemented in Rust. Each method is called from llama.cpp's dispatch.
pub trait CustomSampler: Any + Send {
    /// The name `llama_sampler_name` reports.
    fn name(&self) -> &'static CStr;
    /// Transforms the candidate array in place.
    fn apply(&mut self, view: &mut ArrayView<'_>);
    /// Feeds one chosen token to the sampler's state.
    fn accept(&mut self, _id: TokenId) {}
    /// Clears the sampler's state.
    fn reset(&mut self) {}
    /// What `llama_sampler_clone` returns. A planted control may forget state here on purpose.
    fn clone_sampler(&self) -> Box<dyn CustomSampler>;
    /// Whether this sampler has its own `copy_state` ([`CustomSampler::copy_state`]). Read
    /// once, when the sampler is made. Without one, `llama_sampler_copy` onto it frees its
    /// state and puts in a clone of the source (llama.cpp's fallback). Two Rust samplers are
    /// one type to llama.cpp's type check exactly when they agree here.
    fn has_copy_state(&self) -> bool {
        false
    }
    /// What `llama_sampler_copy(src, self)` does (b10405 on) for a sampler whose
    /// [`CustomSampler::has_copy_state`] is true: make this sampler's state `src`'s, keeping
    /// its configuration. `src` is whatever Rust sampler of this iface the caller named, so an
    /// implementation downcasts it. A planted control may copy too little or too much here.
    fn copy_state(&mut self, _src: &dyn Any) {}
    /// Whether this sampler runs in the compute graph when it is in the backend-capable
    /// prefix of a context's chain (b7709 on; llama.cpp's `backend_init`, called once). If
    /// it says yes, llama.cpp calls [`CustomSampler::graph_apply`] on every graph build and
    /// skips `apply` for it. Read once, when the sampler is made, as with `has_copy_state`.
    fn in_graph(&self) -> bool {
        false
    }
    /// Told that llama.cpp set this sampler up to run in the graph (so its name can say so,
    /// as llama.cpp's own stages' names gain a `+`).
    fn placed_in_graph(&mut self) {}
    /// Adds this sampler's ops to the sampling graph (`backend_apply`).
    fn graph_apply(&mut self, _g: &GraphOps) {}
    /// Fills the inputs this sampler made with [`GraphOps::input`] since the graph was built,
    /// before each run of that graph (`backend_set_input`; a graph may run again without
    /// being rebuilt, so inputs that change between runs are written here, not in
    /// `graph_apply`).
    fn graph_set_input(&mut self, _inputs: &GraphInputs<'_>) {}
}

/// The `llama_token_data_array` a custom sampler's `apply` works on.
pub struct ArrayView<'a> {
    arr: &'a mut sys::llama_token_data_array,
}

impl ArrayView<'_> {
    /// The entries, read-only (for a whole-array pass such as the sorted guard's).
    pub fn entries(&self) -> &[sys::llama_token_data] {
        // SAFETY: llama.cpp hands a live array of `size` entries for the whole call; the
        // callback checked `data` is not null.
        unsafe { std::slice::from_raw_parts(self.arr.data, self.arr.size) }
    }

    /// The entries themselves, for a sampler that works on the whole array at once (the
    /// ledger's penalties scan it in one pass).
    pub fn entries_mut(&mut self) -> &mut [sys::llama_token_data] {
        // SAFETY: as in `entries`, and the view is the only access during the call.
        unsafe { std::slice::from_raw_parts_mut(self.arr.data, self.arr.size) }
    }

    pub fn len(&self) -> usize {
        self.arr.size
    }

    pub fn is_empty(&self) -> bool {
        self.arr.size == 0
    }

    pub fn id(&self, i: usize) -> TokenId {
        TokenId(self.entries()[i].id)
    }

    pub fn logit(&self, i: usize) -> f32 {
        self.entries()[i].logit
    }

    pub fn set_logit(&mut self, i: usize, logit: f32) {
        self.entries_mut()[i].logit = logit;
    }

    pub fn set_p(&mut self, i: usize, p: f32) {
        self.entries_mut()[i].p = p;
    }

    pub fn sorted(&self) -> bool {
        self.arr.sorted
    }

    pub fn set_sorted(&mut self, sorted: bool) {
        self.arr.sorted = sorted;
    }

    pub fn set_selected(&mut self, index: usize) {
        self.arr.selected = index as i64;
    }

    /// Keeps the first `n` entries (as llama.cpp's truncation samplers do, by shrinking `size`).
    pub fn truncate(&mut self, n: usize) {
        self.arr.size = self.arr.size.min(n);
    }

    /// Sorts by logit, largest first (stable, so equal logits keep their order).
    pub fn sort_descending(&mut self) {
        self.entries_mut()
            .sort_by(|a, b| b.logit.total_cmp(&a.logit));
    }
}

/// What a Rust sampler's `ctx` points at: the sampler, and the input tensors of the graph it
/// last added ops to ([`GraphOps::input`]).
///
/// The inputs are forgotten when llama.cpp resets the graph (it calls `backend_reset` before
/// every build, llama-graph.cpp's `build_sampling` on b11429), and also when ops are added
/// after the inputs were filled without a reset in between: a graph that has run is never
/// built on, so that can only be a new graph, and the old tensors may be gone.
struct Boxed {
    sampler: Box<dyn CustomSampler>,
    inputs: Vec<*mut sys::ggml_tensor>,
    /// Whether `inputs` were filled since the last reset.
    filled: bool,
}

impl std::ops::Deref for Boxed {
    type Target = dyn CustomSampler;
    fn deref(&self) -> &Self::Target {
        &*self.sampler
    }
}

impl std::ops::DerefMut for Boxed {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut *self.sampler
    }
}

/// Runs a callback body; a panic aborts rather than unwinding through C frames.
fn no_unwind<T>(f: impl FnOnce() -> T) -> T {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(x) => x,
        Err(_) => std::process::abort(),
    }
}

/// # Safety
/// `smpl` is a live sampler created by [`Sampler::custom`] (its ctx is a `*mut Boxed`).
unsafe fn inner<'a>(smpl: *const sys::llama_sampler) -> &'a mut Boxed {
    // SAFETY: the caller promises `smpl` is live and its ctx is the `Boxed` we leaked.
    unsafe { &mut *((*smpl).ctx as *mut Boxed) }
}

/// [`inner`] for a sampler that is only read (by the state copy, on builds that have one).
///
/// # Safety
/// As for [`inner`].
#[cfg_attr(not(llama_fn = "llama_sampler_copy"), allow(dead_code))]
unsafe fn inner_ref<'a>(smpl: *const sys::llama_sampler) -> &'a Boxed {
    // SAFETY: the caller promises `smpl` is live and its ctx is the `Boxed` we leaked.
    unsafe { &*((*smpl).ctx as *const Boxed) }
}

unsafe extern "C" fn name_cb(smpl: *const sys::llama_sampler) -> *const c_char {
    // SAFETY: llama.cpp calls back only with the live sampler this iface belongs to.
    no_unwind(|| unsafe { inner(smpl) }.name().as_ptr())
}

unsafe extern "C" fn apply_cb(
    smpl: *mut sys::llama_sampler,
    cur_p: *mut sys::llama_token_data_array,
) {
    // SAFETY: llama.cpp passes the live sampler and either NULL or a live array header.
    no_unwind(|| unsafe {
        if let Some(arr) = cur_p.as_mut() {
            if !arr.data.is_null() {
                inner(smpl).apply(&mut ArrayView { arr });
            }
        }
    })
}

unsafe extern "C" fn accept_cb(smpl: *mut sys::llama_sampler, token: sys::llama_token) {
    // SAFETY: llama.cpp calls back only with the live sampler this iface belongs to.
    no_unwind(|| unsafe { inner(smpl) }.accept(TokenId(token)))
}

unsafe extern "C" fn reset_cb(smpl: *mut sys::llama_sampler) {
    // SAFETY: as above.
    no_unwind(|| unsafe { inner(smpl) }.reset())
}

unsafe extern "C" fn clone_cb(smpl: *const sys::llama_sampler) -> *mut sys::llama_sampler {
    // SAFETY: as above.
    no_unwind(|| raw_custom(unsafe { inner(smpl) }.clone_sampler()).unwrap_or(std::ptr::null_mut()))
}

#[cfg(llama_fn = "llama_sampler_copy")]
unsafe extern "C" fn copy_state_cb(src: *const sys::llama_sampler, dst: *mut sys::llama_sampler) {
    // SAFETY: llama.cpp calls copy_state with two live samplers of this iface (it asserts
    // that their ifaces are equal), so both contexts are `Boxed`; src != dst (checked there).
    no_unwind(|| unsafe {
        let from: &dyn Any = &**inner_ref(src);
        inner(dst).copy_state(from)
    })
}

/// `backend_init`: the sampler runs in the graph (it was put on a graph table only if it
/// said so); the buffer type is not asked, so a planted stage claims every backend.
#[cfg(llama_fn = "llama_get_sampled_token_ith")]
fn backend_init(smpl: *mut sys::llama_sampler) -> bool {
    // SAFETY: llama.cpp calls back only with the live sampler this iface belongs to.
    no_unwind(|| {
        unsafe { inner(smpl) }.placed_in_graph();
        true
    })
}

// The callback gained its third parameter with `n_outputs_max_per_seq` (after b10200).
#[cfg(all(
    llama_fn = "llama_get_sampled_token_ith",
    llama_field = "llama_context_params.n_outputs_max_per_seq"
))]
unsafe extern "C" fn backend_init_cb(
    smpl: *mut sys::llama_sampler,
    _buft: sys::ggml_backend_buffer_type_t,
    _n_outputs_max_per_seq: u32,
) -> bool {
    backend_init(smpl)
}

#[cfg(all(
    llama_fn = "llama_get_sampled_token_ith",
    not(llama_field = "llama_context_params.n_outputs_max_per_seq")
))]
unsafe extern "C" fn backend_init_cb(
    smpl: *mut sys::llama_sampler,
    _buft: sys::ggml_backend_buffer_type_t,
) -> bool {
    backend_init(smpl)
}

#[cfg(llama_fn = "llama_get_sampled_token_ith")]
unsafe extern "C" fn backend_apply_cb(
    smpl: *mut sys::llama_sampler,
    ctx: *mut sys::ggml_context,
    _gf: *mut sys::ggml_cgraph,
    data: *mut sys::llama_sampler_data,
) {
    // SAFETY: llama.cpp passes the live sampler, the graph's context and its live data.
    no_unwind(|| unsafe {
        let data = &mut *data;
        let g = GraphOps {
            ctx,
            logits: std::cell::Cell::new(data.logits),
            candidates: data.candidates,
            sampled: std::cell::Cell::new(data.sampled),
            probs: std::cell::Cell::new(data.probs),
            inputs: std::cell::RefCell::new(Vec::new()),
        };
        let b = inner(smpl);
        if b.filled {
            b.inputs.clear();
            b.filled = false;
        }
        b.graph_apply(&g);
        data.logits = g.logits.get();
        data.sampled = g.sampled.get();
        data.probs = g.probs.get();
        b.inputs.extend(g.inputs.into_inner());
    })
}

#[cfg(all(
    llama_fn = "llama_get_sampled_token_ith",
    llama_field = "llama_sampler_i.backend_set_input",
    llama_field = "llama_sampler_i.backend_reset"
))]
unsafe extern "C" fn backend_set_input_cb(smpl: *mut sys::llama_sampler) {
    // SAFETY: llama.cpp calls this with the live sampler before it runs the graph whose
    // inputs the sampler made (allocated by then); `backend_reset_cb` drops stale ones.
    no_unwind(|| unsafe {
        let b = inner(smpl);
        b.sampler
            .graph_set_input(&GraphInputs { tensors: &b.inputs });
    })
}

#[cfg(all(
    llama_fn = "llama_get_sampled_token_ith",
    llama_field = "llama_sampler_i.backend_set_input",
    llama_field = "llama_sampler_i.backend_reset"
))]
unsafe extern "C" fn backend_reset_cb(smpl: *mut sys::llama_sampler) {
    // SAFETY: as above; called before llama.cpp rebuilds the graph the inputs belong to.
    no_unwind(|| {
        let b = unsafe { inner(smpl) };
        b.inputs.clear();
        b.filled = false;
    })
}

unsafe extern "C" fn free_cb(smpl: *mut sys::llama_sampler) {
    // SAFETY: free is called once per sampler, so the leaked Box is reclaimed exactly once.
    no_unwind(|| drop(unsafe { Box::from_raw((*smpl).ctx as *mut Boxed) }))
}

/// The iface of every Rust sampler: two tables, one with `copy_state` (b10405 on) for samplers
/// that say they have one, one without, so `llama_sampler_copy` takes llama.cpp's own
/// fallback (clone, free, transplant) for the others, as for its built-ins without one.
/// Two more, with the graph callbacks, for samplers that run in the graph.
fn iface(own_copy_state: bool, in_graph: bool) -> *mut sys::llama_sampler_i {
    static TABLES: OnceLock<[sys::llama_sampler_i; 4]> = OnceLock::new();
    let tables = TABLES.get_or_init(|| {
        let table = |copy: bool, graph: bool| {
            // SAFETY: every field is an Option of a function pointer; all-zero is all None,
            // which is how llama.cpp spells "not implemented" (releases have different fields).
            let mut i: sys::llama_sampler_i = unsafe { std::mem::zeroed() };
            i.name = Some(name_cb);
            i.accept = Some(accept_cb);
            i.apply = Some(apply_cb);
            i.reset = Some(reset_cb);
            i.clone = Some(clone_cb);
            i.free = Some(free_cb);
            #[cfg(llama_fn = "llama_sampler_copy")]
            if copy {
                i.copy_state = Some(copy_state_cb);
            }
            #[cfg(llama_fn = "llama_get_sampled_token_ith")]
            if graph {
                i.backend_init = Some(backend_init_cb);
                i.backend_apply = Some(backend_apply_cb);
                #[cfg(all(
                    llama_field = "llama_sampler_i.backend_set_input",
                    llama_field = "llama_sampler_i.backend_reset"
                ))]
                {
                    i.backend_set_input = Some(backend_set_input_cb);
                    i.backend_reset = Some(backend_reset_cb);
                }
            }
            let _ = (copy, graph);
            i
        };
        [
            table(false, false),
            table(true, false),
            table(false, true),
            table(true, true),
        ]
    });
    let k = usize::from(own_copy_state) + 2 * usize::from(in_graph);
    // llama.cpp never writes through the iface pointer.
    &tables[k] as *const sys::llama_sampler_i as *mut sys::llama_sampler_i
}

/// A llama.cpp sampler around `s`. Before b4718 the C API has no `llama_sampler_init`: a
/// sampler can only be made by llama.cpp's C++ `new`, so Rust samplers are not offered there.
fn raw_custom(s: Box<dyn CustomSampler>) -> Result<*mut sys::llama_sampler> {
    #[cfg(llama_fn = "llama_sampler_init")]
    {
        let table = iface(s.has_copy_state(), s.in_graph());
        let ctx = Box::into_raw(Box::new(Boxed {
            sampler: s,
            inputs: Vec::new(),
            filled: false,
        })) as *mut c_void;
        // SAFETY: a static iface whose free callback reclaims exactly this ctx.
        Ok(unsafe { ffi!(sys::llama_sampler_init(table, ctx)) })
    }
    #[cfg(not(llama_fn = "llama_sampler_init"))]
    {
        let _ = (s, iface(false, false));
        Err(crate::NotOffered {
            what: "a sampler written in Rust (llama_sampler_init)",
        }
        .into())
    }
}

impl Sampler {
    /// A llama.cpp sampler whose callbacks are `s`'s methods. It joins chains, clones and
    /// frees like any built-in.
    pub fn custom(s: impl CustomSampler) -> Result<Sampler> {
        Sampler::custom_with(s, None)
    }

    /// [`Sampler::custom`] for a sampler told a vocabulary of `n_vocab` ids: ids at or above
    /// it are refused before they reach it, as for llama.cpp's own samplers of that size.
    pub fn custom_for_vocab(s: impl CustomSampler, n_vocab: i32) -> Result<Sampler> {
        Sampler::custom_with(s, Some(n_vocab))
    }

    fn custom_with(s: impl CustomSampler, n_vocab: Option<i32>) -> Result<Sampler> {
        // SAFETY: a fresh sampler from llama_sampler_init, owned by nobody else; its callbacks
        // check their arguments and never unwind.
        unsafe { Sampler::from_raw(raw_custom(Box::new(s))?, n_vocab) }
    }
}
