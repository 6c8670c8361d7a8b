func.func @main(%x: tensor<1xf32>) -> tensor<1xf32> {
  %q = arith.truncf %x : tensor<1xf32> to tensor<1xf6E2M3FN>
  %b = arith.extf %q : tensor<1xf6E2M3FN> to tensor<1xf32>
  return %b : tensor<1xf32>
}
