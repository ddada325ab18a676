// TieringLeadTest.cpp - mt-tier's lead (passes/tiering/TieringLead.h): a parameter
// fetch that the link's queue lands after its use moves earlier, within the budget and
// only for the parameters the host holds.
#include "tiering/TieringLead.h"

#include "megatrain/plan/DeviceProfile.h"
#include "megatrain/Dialect/MtDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <string>

namespace megatrain {
namespace {

// A relu moves 32 KiB in 1 ms; a 16 KiB value crosses h2d in 2 ms. y is
// offloaded after its def and prefetched at position 6, right before w's fetch at 7.
// Compute reaches 6 at 4 ms (the relus at 1, 3, 4 and 5): the prefetch lands at 6 ms,
// and w, queued behind it, at 8 ms, while its use (the matmul at 9) comes at 5 ms.
// Issued before %c (position 5, compute done at 3 ms) it lands at 5 ms, in time.
constexpr const char *kStep = R"(
func.func @step() {
  %x = mt.input {name = "x"} : tensor<64x64xf32>
  %y = mt.relu %x : tensor<64x64xf32>
  %hy = mt.offload %y : tensor<64x64xf32>
  %a = mt.relu %x : tensor<64x64xf32>
  %b = mt.relu %a : tensor<64x64xf32>
  %c = mt.relu %b : tensor<64x64xf32>
  %py = mt.prefetch %hy : tensor<64x64xf32>
  %w = mt.param {name = "w", trainable = true} : tensor<64x64xf32>
  %d = mt.relu %c : tensor<64x64xf32>
  %e = mt.matmul %d, %w : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %f = mt.add %e, %py : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %s = mt.reduce_sum %f {axes = array<i64: 0, 1>, keepdims = false} : (tensor<64x64xf32>) -> tensor<f32>
  mt.loss %s : tensor<f32>
  return
}
)";

class TieringLeadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    context.getOrLoadDialect<mt::MtDialect>();
    context.getOrLoadDialect<mlir::func::FuncDialect>();
    module = mlir::parseSourceString<mlir::ModuleOp>(kStep, &context);
    ASSERT_TRUE(module);
    func = *module->getOps<mlir::func::FuncOp>().begin();
    std::string error;
    ASSERT_TRUE(parseDeviceProfile(
        R"({"name": "test", "launch_s": 1e-12, "hbm_bytes_per_s": 32768000, "matmul_fp32_flops": 1e21,
            "h2d_bytes_per_s": 8192000, "d2h_bytes_per_s": 8192000})",
        profile, error))
        << error;
  }

  /// The step's one mt.param.
  mlir::Operation *param() {
    mlir::Operation *found = nullptr;
    func.walk([&](mt::ParamOp op) { found = op; });
    return found;
  }

  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::func::FuncOp func;
  DeviceProfile profile;
};

TEST_F(TieringLeadTest, ALateFetchMovesToWhereItLandsInTime) {
  TieringModel model(func, profile);
  model.analyze();
  const int64_t before = model.positionOf(param());
  ASSERT_EQ(before, 7);
  LeadResult lead = leadParamFetches(model, /*budget=*/0);
  EXPECT_EQ(lead.late, 1);
  EXPECT_NEAR(lead.lateSeconds, 3e-3, 1e-6);
  EXPECT_EQ(lead.moved, 1);
  // Now right before %c, whose relu is the op at position 6 after it.
  const int64_t after = model.positionOf(param());
  EXPECT_EQ(after, 5);
  mlir::Operation *next = param()->getNextNode();
  ASSERT_TRUE(mlir::isa<mt::ReluOp>(next));
  EXPECT_EQ(model.positionOf(next), 6);
  // Its readers are unchanged.
  for (mlir::Operation *user : param()->getResult(0).getUsers())
    EXPECT_TRUE(mlir::isa<mt::MatMulOp>(user));
}

TEST_F(TieringLeadTest, AFetchThatWouldGrowAFullArenaStays) {
  TieringModel model(func, profile);
  model.analyze();
  // A budget below what the plan places already: no move fits it.
  const uint64_t arena = model.arenaBytes();
  LeadResult lead = leadParamFetches(model, arena - 1);
  EXPECT_EQ(lead.late, 1);
  EXPECT_EQ(lead.moved, 0);
  EXPECT_EQ(model.positionOf(param()), 7);
}

TEST_F(TieringLeadTest, ADeviceHomesFetchIsNoTransfer) {
  TieringModel model(func, profile);
  model.analyze();
  // w updated on the device (host share 0): its "fetch" is a cast, never late.
  llvm::StringMap<double> shares;
  shares["w"] = 0.0;
  LeadResult lead = leadParamFetches(model, 0, shares);
  EXPECT_EQ(lead.late, 0);
  EXPECT_EQ(lead.moved, 0);
  EXPECT_EQ(model.positionOf(param()), 7);
}

} // namespace
} // namespace megatrain
