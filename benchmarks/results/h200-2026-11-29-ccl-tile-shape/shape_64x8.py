SHAPE = (64, 8)
