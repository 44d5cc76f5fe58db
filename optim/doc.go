// Package optim updates model parameters: AdamW with decoupled weight decay
// over a model's flat parameter arena, global gradient-norm clipping, and
// learning-rate schedules (linear warm-up, then constant or cosine decay).
//
// The central type is AdamW. Its moments live on the model's device in
// float32 arenas laid out like the parameters, so one fused device call
// updates every weight; on a GPU the device keeps float32 master weights
// beside its bfloat16 compute copy. Step reads the gradient arena and never
// clears it: the trainer zeroes gradients before accumulating the next
// mini-batch. NewShard builds an AdamW over some spans of the arena with
// only their moments (a ZeRO-1 rank's shard, shard.go), and NewShardPacked
// one that reads a packed gradient shard instead of the arena (ZeRO-2);
// StepNorm steps it
// with a gradient norm summed over the ranks, and SaveShards and Load keep
// the one unsharded state file. Errors concern only construction (a bad
// config, spans outside the arena) and the optimizer-state files (Save,
// SaveShards, Load), which name the file and what disagreed.
package optim
