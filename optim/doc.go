// Package optim updates model parameters: AdamW with decoupled weight decay
// over the flat parameter arena, gradient-norm clipping and learning-rate
// schedules.
package optim
