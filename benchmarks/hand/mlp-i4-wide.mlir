func.func @main() -> tensor<3xi4> {
  %c = arith.constant dense<[1, 2, 3]> : tensor<3xi4>
  return %c : tensor<3xi4>
}
