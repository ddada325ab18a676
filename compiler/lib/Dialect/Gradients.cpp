//===- Gradients.cpp - reverse-mode rules of the differentiable mt ops ---===//
// (rules being written)
