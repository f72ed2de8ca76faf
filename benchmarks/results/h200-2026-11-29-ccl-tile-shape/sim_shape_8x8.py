SHAPE = (8, 8)
