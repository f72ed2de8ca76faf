SHAPE = (8, 2)
