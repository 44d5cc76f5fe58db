// Package model implements the Qwen2-family decoder that r1go trains: its
// Hugging Face configuration and checkpoints, a forward pass over packed
// variable-length sequences, a hand-written backward pass, a KV cache for
// decoding, and the Device seam between the math and the hardware.
//
// The central type is Model: a Config, a Device, and three arenas on that
// device, each one allocation cut into named views:
//
//	Params  every weight, per layer in Hugging Face order; q/k/v projections
//	        adjacent and gate/up adjacent, so each pair runs as one matmul
//	Grads   the same layout as Params
//	acts    the activations of the last Forward ([T, C] residuals per layer
//	        and, unless Recompute is set, each layer's saved intermediates;
//	        a long batch of a large model that does not save its layers
//	        runs in groups of sequences, one group's layer scratch at a
//	        time: see groupTokens)
//
// A training step is Forward(batch, true), then Backward with per-token
// gradients of the outputs (d/dlogprob and d/dentropy for a policy,
// d/dvalue for a critic), which the loss code on the host computes. The
// model never sees the loss. Parameter gradients accumulate (+=) across
// Backward calls until ZeroGrads; activation gradients overwrite (=).
//
// Device lists the fused operations (llm.c style, each forward beside its
// backward) that a piece of hardware implements, and device.go lists every
// optional capability beside it, with who implements it and which call
// changes with it. Package model/cpu is the reference device, float32
// storage with float64 reductions, parallel over all cores, with the tuned
// matmul of model/cpu/gemm; package cuda is the GPU device. This package
// imports neither: it sees a device only through Device and its
// capabilities. Comm is the seam to the data-parallel transport, which
// package model/comm holds.
//
// Errors: files, configurations and batches from outside (a corrupt
// checkpoint, an unknown rope scaling type, a token id past the vocabulary)
// return errors that name the file, field or position. Device methods panic
// on shape mismatches, which are programmer errors.
package model
