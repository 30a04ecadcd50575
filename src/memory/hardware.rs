//! `[hardware]` and `[model]`: the GPUs and the model, by catalog name or by their numbers. Both
//! are optional; they are what derives the KV budget and predicts step times.

use crate::catalog::{Catalog, WeightDtype};
use crate::settings::{keys, Bad, Values};

const SGLANG: crate::settings::When = crate::settings::When::Engine(&["sglang"], "SGLang");

keys! {
/// `[hardware]` and `[model]`.
KEYS:
"hardware" [Table, Absent("none"), All, ""]
    "the GPUs; needed to derive the KV budget or to predict step times", e.g. "[hardware]";
"hardware.gpu" [Text, Absent("none"), All, ""]
    "a GPU of the catalog (`servesim catalog`)", e.g. r#""h100""#;
"hardware.memory_mib" [Integer(1, 16 << 20), Derived("the catalog's"), All, "MiB"]
    "GPU memory as nvidia-smi reports it", e.g. "97887";
"hardware.memory_before_weights_gib" [Number(Within(0.001, 16384.0)), Derived("GPU memory − 1 GiB (TP 1) or − 2 GiB (TP > 1)"), SGLANG, "GiB"]
    "SGLang's M_pre: free memory per GPU after the CUDA context and NCCL, before the weights load", e.g. "93.6";
"hardware.num_gpus" [Integer(1, 4096), Derived("tensor_parallel"), All, ""]
    "GPUs serving the model", e.g. "8";
"hardware.tensor_parallel" [Integer(1, 4096), Int(1), All, ""]
    "tensor-parallel size: splits the weights and GQA KV heads; above 1, log lines carry SGLang's ` TP0`", e.g. "8";
"model" [Table, Absent("none"), All, ""]
    "the model; needed to derive the KV budget or to predict step times", e.g. "[model]";
"model.name" [Text, Absent("none"), All, ""]
    "a model of the catalog (`servesim catalog`)", e.g. r#""llama-3.1-8b""#;
"model.kv_bytes_per_token" [Integer(1, 1 << 30), Derived("the catalog's, with SGLang's TP rules"), All, "bytes"]
    "KV cache bytes per token per GPU", e.g. "70272";
"model.weight_gib_per_gpu" [Number(Within(0.0, 1e6)), Derived("the catalog model's parameters in model.weight_dtype, sharded over TP"), All, "GiB"]
    "weights resident on each GPU (the memory model only: the roofline reads the weights in model.weight_dtype)", e.g. "72.3";
"model.weight_dtype" [OneOf(&["bf16", "fp8", "int4", "int4-experts"]), Derived("the catalog's released format"), All, ""]
    "how the served checkpoint stores its weights: drives the weights in memory and the bytes the roofline reads (fp8 also runs the matmuls at the GPU's FP8 rate)", e.g. r#""fp8""#;
"model.context_len" [Integer(2, 1 << 31), Derived("the catalog's"), All, "tokens"]
    "the model's context length; caps request lengths as SGLang does (min(context − 1, pool − 1))", e.g. "262144";
}

/// `[hardware]`.
#[derive(Clone, Debug)]
pub struct HardwareSpec {
    /// Catalog name of the GPU, if given.
    pub gpu: Option<String>,
    /// The catalog entry of `gpu`.
    pub gpu_entry: Option<crate::catalog::Gpu>,
    /// GPU memory as `nvidia-smi` reports it, if given (else the catalog's).
    pub memory_mib: Option<u64>,
    /// Free memory per GPU after the CUDA context and NCCL are up, before the weights load
    /// (SGLang's `M_pre`), if given.
    pub memory_before_weights_gib: Option<f64>,
    /// GPUs serving the model.
    pub num_gpus: u32,
    /// Tensor-parallel size.
    pub tensor_parallel: u32,
}

impl HardwareSpec {
    /// Read `[hardware]` (`None` when absent); the GPU is looked up in `catalog`.
    pub fn read(v: &mut dyn Values, catalog: &Catalog) -> Result<Option<Self>, Bad> {
        if !v.has("hardware")? {
            return Ok(None);
        }
        let gpu: Option<String> = v.opt("hardware.gpu")?;
        let gpu_entry = match gpu.as_deref().map(|name| (name, catalog.gpu(name))) {
            None => None,
            Some((_, Some(entry))) => Some(entry.clone()),
            Some((name, None)) => {
                let or = "`servesim catalog` lists the GPUs; or give hardware.memory_mib";
                let hint = catalog
                    .suggest_gpu(name)
                    .map_or(or.to_string(), |s| format!("did you mean \"{s}\"? {or}"));
                return Err(v.bad("hardware.gpu", "is not in the catalog", hint));
            }
        };
        let tensor_parallel: u32 = v.get("hardware.tensor_parallel")?;
        let num_gpus = v.opt("hardware.num_gpus")?.unwrap_or(tensor_parallel);
        if num_gpus % tensor_parallel != 0 {
            let msg = format!(
                "tensor_parallel = {tensor_parallel} does not divide num_gpus = {num_gpus}"
            );
            let hint = "each server uses tensor_parallel GPUs; num_gpus must be a multiple of it";
            return Err(v.fail("hardware.tensor_parallel", "hardware", msg, hint));
        }
        Ok(Some(HardwareSpec {
            gpu,
            gpu_entry,
            memory_mib: v.opt("hardware.memory_mib")?,
            memory_before_weights_gib: v.opt("hardware.memory_before_weights_gib")?,
            num_gpus,
            tensor_parallel,
        }))
    }

    /// GPU memory in MiB, given or from the catalog.
    pub fn gpu_memory_mib(&self) -> Option<u64> {
        self.memory_mib
            .or(self.gpu_entry.as_ref().map(|g| g.memory_mib))
    }
}

/// `[model]`.
#[derive(Clone, Debug)]
pub struct ModelSpec {
    /// Catalog name of the model, if given.
    pub name: Option<String>,
    /// The catalog entry of `name`, with its weights in `model.weight_dtype` when given.
    pub entry: Option<crate::catalog::Model>,
    /// `model.weight_dtype`, when given (the entry's format then is this one).
    pub weight_dtype: Option<WeightDtype>,
    /// KV bytes per token per GPU, if given.
    pub kv_bytes_per_token: Option<u64>,
    /// Weights resident per GPU (GiB), if given.
    pub weight_gib_per_gpu: Option<f64>,
    /// The model's context length (tokens), given or from the catalog; it caps request lengths.
    pub context_len: Option<u64>,
}

impl ModelSpec {
    /// Read `[model]` (`None` when absent); the model is looked up in `catalog`.
    pub fn read(v: &mut dyn Values, catalog: &Catalog) -> Result<Option<Self>, Bad> {
        if !v.has("model")? {
            return Ok(None);
        }
        let name: Option<String> = v.opt("model.name")?;
        let entry = match name.as_deref().map(|name| (name, catalog.model(name))) {
            None => None,
            Some((_, Some(entry))) => Some(entry.clone()),
            Some((name, None)) => {
                let or = "`servesim catalog` lists the models; or give kv_bytes_per_token and weight_gib_per_gpu";
                let hint = catalog
                    .suggest_model(name)
                    .map_or(or.to_string(), |s| format!("did you mean \"{s}\"? {or}"));
                return Err(v.bad("model.name", "is not in the catalog", hint));
            }
        };
        let weight_dtype = match v.opt::<String>("model.weight_dtype")? {
            None => None,
            Some(d) => match WeightDtype::from_name(&d) {
                Some(d) if entry.is_some() => Some(d),
                _ => {
                    let msg = "a weight format needs the model's architecture, and this scenario names no catalog model";
                    let hint = "set model.name (see `servesim catalog`), or give model.weight_gib_per_gpu alone";
                    return Err(v.bad("model.weight_dtype", msg, hint));
                }
            },
        };
        let entry = match (entry, weight_dtype) {
            (Some(e), Some(d)) => Some(e.with_weight_dtype(d)),
            (e, _) => e,
        };
        let context_len = v
            .opt("model.context_len")?
            .or(entry.as_ref().map(|e| u64::from(e.context_len_tokens)));
        Ok(Some(ModelSpec {
            name,
            entry,
            weight_dtype,
            kv_bytes_per_token: v.opt("model.kv_bytes_per_token")?,
            weight_gib_per_gpu: v.opt("model.weight_gib_per_gpu")?,
            context_len,
        }))
    }
}

impl ModelSpec {
    /// A note when `model.weight_gib_per_gpu` is given beside a catalog model and differs by
    /// more than a quarter from that model's weights at TP `tp` in its format: the memory model
    /// then uses the given figure while the roofline reads the format's bytes, so the note names
    /// the format whose weights come closest to the given figure.
    pub fn weights_note(&self, tp: u32) -> Option<String> {
        let (given, entry) = (self.weight_gib_per_gpu?, self.entry.as_ref()?);
        let gib = |m: &crate::catalog::Model| m.weight_bytes_per_gpu(tp) as f64 / super::GIB;
        let derived = gib(entry);
        if derived <= 0.0 || (given / derived - 1.0).abs() <= 0.25 {
            return None;
        }
        let closest = WeightDtype::ALL
            .into_iter()
            .map(|d| (d, gib(&entry.with_weight_dtype(d))))
            .min_by(|a, b| (a.1 - given).abs().total_cmp(&(b.1 - given).abs()))
            .filter(|(d, _)| *d != entry.weight_dtype);
        let fix = match closest {
            Some((d, w)) => format!(
                "if the served checkpoint is {0} ({w:.1} GiB per GPU), set model.weight_dtype = \"{0}\" so both agree",
                d.as_str()
            ),
            None => "check the figure, or set model.weight_dtype to the served format".into(),
        };
        Some(format!(
            "model.weight_gib_per_gpu = {given} sizes the KV pool, but {} in {} is {derived:.1} GiB per GPU at TP {tp}, and the roofline reads those bytes every step; {fix}",
            entry.display,
            entry.weight_dtype.as_str(),
        ))
    }
}
