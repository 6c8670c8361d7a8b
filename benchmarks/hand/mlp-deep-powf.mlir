func.func @main(%x: tensor<f32>) -> tensor<f32> {
  %p = math.powf %x, %x : tensor<f32>
  return %p : tensor<f32>
}
