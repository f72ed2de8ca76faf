SHAPE = (32, 4)
