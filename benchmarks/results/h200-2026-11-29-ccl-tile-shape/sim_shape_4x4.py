SHAPE = (4, 4)
