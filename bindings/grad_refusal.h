// obsaug's ops have no derivative. An input that requires grad, with grad
// mode on, would give a result that silently drops out of the autograd graph
// (backward "succeeds" and leaves .grad None), so every entry point refuses
// it with a ValueError that names the argument and the ways out (.detach(),
// torch.no_grad()). Under torch.no_grad(), or for inputs that do not require
// grad, the calls run as before.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/stack.h>

#include <string>

namespace c10 {
class OperatorHandle;
}

namespace obsaug::bindings {

// ValueError when grad mode is on and `tensor` (argument `arg` of `caller`)
// requires grad; nothing otherwise (an undefined tensor included).
void refuse_grad(const at::Tensor& tensor, const std::string& caller, const std::string& arg);

// Bumps the version of a tensor a call wrote in place (an undefined or
// inference tensor has none), as ADInplaceOrView does for PyTorch's own ops:
// backward through a saved, since overwritten tensor then fails by name.
void note_written(const at::Tensor& tensor);

// The Autograd-key kernel of every torch.ops.obsaug op (boxed): refuse_grad
// on each tensor argument, then the call below autograd. It also runs under
// torch.compile (on FakeTensors), so a trace fails with the eager message
// (Dynamo raises it as a TorchRuntimeError).
void refuse_grad_then_call(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// The ADInplaceOrView-key kernel of the ops that write a Tensor(a!) argument
// (boxed): the call, then note_written on each such argument, as PyTorch's
// own in-place ops do there. That key stays on under torch.inference_mode()
// (which skips Autograd), so a normal tensor written there is bumped too.
void call_then_note_writes(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace obsaug::bindings
