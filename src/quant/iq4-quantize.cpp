// placeholder: filled in by the quant work
