def train_heads(): pass
class TrainResult: pass
