// TieringModelTest.cpp - mt-tier's three-queue timeline (passes/tiering/TieringModel.h):
// which parameters it takes to be on the host for a share of the state and of the
// micro-batch sums, and the step's period when the host's updates run on into the next step.
#include "tiering/TieringModel.h"
#include "tiering/TieringPolicies.h"

#include "megatrain/plan/DeviceProfile.h"
#include "megatrain/plan/OpCost.h"
#include "megatrain/Dialect/MtDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

namespace megatrain {
namespace {

// Two layers; w1's gradient comes first and its update runs first, w0's last. The
// "gradients" are matmuls of the right shape: only their timing matters here.
constexpr const char *kProduct = " : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>\n";

std::string product(const std::string &result, const std::string &lhs, const std::string &rhs) {
  return "  " + result + " = mt.matmul " + lhs + ", " + rhs + kProduct;
}

// Where a gradient goes: its update, or (index >= 0) a micro-batch part.
std::string sink(const std::string &grad, const std::string &param, int index = -1) {
  if (index >= 0)
    return "  mt.grad_part " + grad + " {count = 2 : i64, index = " + std::to_string(index) +
           " : i64, param = \"" + param + "\"} : tensor<64x64xf32>\n";
  return "  mt.adamw " + grad +
         " {beta1 = 9.000000e-01 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, lr = 1.0e-03 : "
         "f64, param = \"" + param + "\", weight_decay = 0.0 : f64} : tensor<64x64xf32>\n";
}

// One micro-batch's forward and backward (values named with `tag`), each gradient to its
// sink; the first one fetches w0 and w1 right before their first use.
std::string layers(const std::string &tag, int partIndex) {
  const std::string x = "%x" + tag, a0 = "%a0" + tag, a1 = "%a1" + tag, g0 = "%g0" + tag,
                    g1 = "%g1" + tag;
  auto fetch = [&](const char *param) {
    return tag.empty() ? std::string("  %") + param + " = mt.param {name = \"" + param +
                             "\", trainable = true} : tensor<64x64xf32>\n"
                       : std::string();
  };
  return "  " + x + " = mt.input {name = \"" + (tag.empty() ? "x" : "x@" + tag) +
         "\"} : tensor<64x64xf32>\n" + fetch("w0") + product(a0, x, "%w0") + fetch("w1") +
         product(a1, a0, "%w1") + product(g1, a0, a1) + sink(g1, "w1", partIndex) +
         product(g0, x, a1) + sink(g0, "w0", partIndex);
}

// One batch: the two layers, their updates.
const std::string kStep = "func.func @step() {\n" + layers("", -1) + "  return\n}\n";

// The same two layers over two micro-batches (mt-microbatch's shape): micro-batch 0's
// gradients go to mt.grad_part, micro-batch 1's to the updates, which add the last part.
const std::string kMicrobatchStep =
    "func.func @step() {\n" + layers("", 0) + layers("1", -1) + "  return\n}\n";

class TieringModelTest : public ::testing::Test {
 protected:
  void SetUp() override { load(kStep); }

  void load(const std::string &source) {
    context.getOrLoadDialect<mt::MtDialect>();
    context.getOrLoadDialect<mlir::func::FuncDialect>();
    module = mlir::parseSourceString<mlir::ModuleOp>(source, &context);
    ASSERT_TRUE(module);
    func = *module->getOps<mlir::func::FuncOp>().begin();
    // Every kernel costs its launch (1 ms); the links are fast; the host updates 4096
    // parameters (one layer) in 20 ms.
    std::string error;
    ASSERT_TRUE(parseDeviceProfile(
        R"({"name": "test", "launch_s": 1e-3, "hbm_bytes_per_s": 1e18, "matmul_fp32_flops": 1e21,
            "h2d_bytes_per_s": 1e15, "d2h_bytes_per_s": 1e15, "host_adamw_params_per_s": 204800})",
        profile, error))
        << error;
  }

  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::func::FuncOp func;
  DeviceProfile profile;
};

TEST_F(TieringModelTest, TheHostHoldsTheParametersUpdatedFirst) {
  TieringModel model(func, profile);
  model.analyze();
  // mt-homes gives the device homes to the parameters updated last.
  llvm::StringMap<double> half = model.hostShares(0.5);
  EXPECT_EQ(half.lookup("w1"), 1.0);
  EXPECT_EQ(half.lookup("w0"), 0.0);
  llvm::StringMap<double> most = model.hostShares(0.75);
  EXPECT_EQ(most.lookup("w1"), 1.0);
  EXPECT_EQ(most.lookup("w0"), 0.5);
  llvm::StringMap<double> none = model.hostShares(0.0);
  EXPECT_EQ(none.lookup("w1"), 0.0);
  EXPECT_EQ(none.lookup("w0"), 0.0);

  const double update = hostAdamWSeconds(4096, profile);
  double busy = -1;
  model.predictStepSeconds({0.5, 0.5}, &busy);
  EXPECT_DOUBLE_EQ(busy, update);
  model.predictStepSeconds({0.75, 0.75}, &busy);
  EXPECT_DOUBLE_EQ(busy, 1.5 * update);
  model.predictStepSeconds({1.0, 1.0}, &busy);
  EXPECT_DOUBLE_EQ(busy, 2 * update);
  model.predictStepSeconds({0.0, 0.0}, &busy);
  EXPECT_DOUBLE_EQ(busy, 0.0);
}

TEST_F(TieringModelTest, HostUpdatesRunOnUntilTheNextStepFetchesTheirParameter) {
  TieringModel model(func, profile);
  model.analyze();
  mlir::Block &body = func.getBody().front();
  auto positionOf = [&](auto predicate) {
    return model.positionOf(&*std::find_if(body.begin(), body.end(), predicate));
  };
  const double kernel = model.computeAt(
      positionOf([](mlir::Operation &op) { return mlir::isa<mt::MatMulOp>(op); }));
  const double fetch = model.h2dAt(positionOf([](mlir::Operation &op) {
    auto param = mlir::dyn_cast<mt::ParamOp>(op);
    return param && param.getName() == "w1";
  }));
  const double copy = transferSeconds(64 * 64 * 4, Link::DeviceToHost, profile);
  const double update = hostAdamWSeconds(64 * 64, profile);
  ASSERT_GT(kernel, 0.0);
  ASSERT_GT(update, 4 * (kernel + fetch + copy));  // the host bounds the step

  // Only w1 (updated first) on the host; w0's fetch and update are the device's. w1 is
  // fetched after one kernel; two kernels later its gradient is copied out and updated:
  // the update ends at kernel + fetch + 2 kernels + copy + update. The next step fetches
  // w1 one kernel in, so the steps repeat a kernel sooner than that: the step does not
  // wait for the update, only the next step's fetch of w1 does.
  const double endOfUpdate = 3 * kernel + fetch + copy + update;
  EXPECT_NEAR(model.predictStepSeconds({0.5, 0.5}), endOfUpdate - kernel, 1e-9);

  // Every parameter on the host: w0, updated last, is fetched first, so the next step
  // cannot start before the host is done; w0's update waits for w1's.
  EXPECT_NEAR(model.predictStepSeconds({1.0, 1.0}), 2 * fetch + 3 * kernel + copy + 2 * update, 1e-9);

  // Nothing on the host: the four kernels (the fetches take none of the link).
  EXPECT_NEAR(model.predictStepSeconds({0.0, 0.0}), 4 * kernel, 1e-9);
}

TEST_F(TieringModelTest, MicrobatchSumsOnTheHostOnlyWhereTheirShareSaysSo) {
  load(kMicrobatchStep);
  TieringModel model(func, profile);
  model.analyze();
  const double update = hostAdamWSeconds(4096, profile);
  const double sum = hostAccumulateSeconds(4096, profile);
  ASSERT_GT(sum, 0.0);
  double busy = -1;
  // Both parameters on the host, summed there: two updates, each after the sum of its
  // last part into the first (a part 0 is copied, not summed).
  model.predictStepSeconds({1.0, 1.0}, &busy);
  EXPECT_DOUBLE_EQ(busy, 2 * update + 2 * sum);
  // Summed in device accumulators: the host only updates.
  model.predictStepSeconds({1.0, 0.0}, &busy);
  EXPECT_DOUBLE_EQ(busy, 2 * update);
  // Half the sums on the host: those of w1, updated first (mt-homes gives the device
  // accumulators to the parameters updated last).
  model.predictStepSeconds({1.0, 0.5}, &busy);
  EXPECT_DOUBLE_EQ(busy, 2 * update + sum);
  // A device home's sum is the device's, whatever the sums' share says.
  model.predictStepSeconds({0.5, 1.0}, &busy);
  EXPECT_DOUBLE_EQ(busy, update + sum);
  // Fewer copies out and no host sums: the step is not slower.
  EXPECT_LE(model.predictStepSeconds({1.0, 0.0}), model.predictStepSeconds({1.0, 1.0}));
}

TEST_F(TieringModelTest, VisitingSumsCrossTheLinksInsteadOfTheHost) {
  load(kMicrobatchStep);
  // w1's accumulator lives on the host and visits the device (mt.accumulate = "visit").
  func.walk([&](mt::ParamOp param) {
    if (param.getName() == "w1")
      param->setAttr(mt::attr::kAccumulate, mlir::StringAttr::get(&context, "visit"));
  });
  TieringModel model(func, profile);
  model.analyze();
  const double update = hostAdamWSeconds(4096, profile);
  const double sum = hostAccumulateSeconds(4096, profile);
  double busy = -1;
  // Every sum share on the host: w0's is summed there, w1's visits (no host sum).
  model.predictStepSeconds({1.0, 1.0}, &busy);
  EXPECT_DOUBLE_EQ(busy, 2 * update + sum);
  // w1 on the host (updated first), w0 a device home: the host only updates w1.
  model.predictStepSeconds({0.5, 1.0}, &busy);
  EXPECT_DOUBLE_EQ(busy, update);
  // Over slow links (a part's copy 10 ms each way) a visit's trips show in the step: part 0
  // out, the last part in and out again, where a whole device sum copies out once.
  std::string error;
  ASSERT_TRUE(parseDeviceProfile(
      R"({"name": "slow links", "launch_s": 1e-3, "hbm_bytes_per_s": 1e18,
          "matmul_fp32_flops": 1e21, "h2d_bytes_per_s": 1638400, "d2h_bytes_per_s": 1638400,
          "host_adamw_params_per_s": 204800})",
      profile, error))
      << error;
  TieringModel slowWhole(func, profile), slowVisit(func, profile);
  func.walk([&](mt::ParamOp param) { param->removeAttr(mt::attr::kAccumulate); });
  slowWhole.analyze();
  func.walk([&](mt::ParamOp param) {
    if (param.getName() == "w1")
      param->setAttr(mt::attr::kAccumulate, mlir::StringAttr::get(&context, "visit"));
  });
  slowVisit.analyze();
  EXPECT_GT(slowVisit.predictStepSeconds({1.0, 0.0}), slowWhole.predictStepSeconds({1.0, 0.0}));
}

TEST(HostShareBeside, AccumulatorsTakeTheRoomBeforeTheHomes) {
  FillOptions fill;
  fill.deviceBytes = 1000;
  fill.stateDeviceBytes = 1600;  // 16 bytes a parameter with micro-batches
  // Homes first (no accumulators given the room): the room beside a 200-byte arena
  // holds half the state.
  TieringModel::HostShare homes = hostShareBeside(200, fill);
  EXPECT_DOUBLE_EQ(homes.state, 0.5);
  EXPECT_DOUBLE_EQ(homes.sums, 0.5);
  // Accumulators first (4 of the 16 bytes): 400 bytes of room sum every part on the
  // device and leave every home on the host.
  fill.accumulatorBytes = 400;
  TieringModel::HostShare sums = hostShareBeside(600, fill);
  EXPECT_DOUBLE_EQ(sums.sums, 0.0);
  EXPECT_DOUBLE_EQ(sums.state, 1.0);
  // 200 bytes: half the sums on the device, the other half on the host.
  sums = hostShareBeside(800, fill);
  EXPECT_DOUBLE_EQ(sums.sums, 0.5);
  EXPECT_DOUBLE_EQ(sums.state, 1.0);
  // 1000 bytes: every sum, and half of the rest of the state (600 of 1200 bytes).
  sums = hostShareBeside(0, fill);
  EXPECT_DOUBLE_EQ(sums.sums, 0.0);
  EXPECT_DOUBLE_EQ(sums.state, 0.5);
  // No capacity known: everything on the host.
  EXPECT_DOUBLE_EQ(hostShareBeside(0, FillOptions()).state, 1.0);
}

}  // namespace
}  // namespace megatrain
