"""Pop consumption (RocketMQ 5's receive / ack / change-invisible), the broker side of the 5.x gRPC front door and of
RocketMQ 5's remoting pop codes (:mod:`broker.pop.processor`): receipt handles (:mod:`broker.pop.receipt`), the pop,
ack and invisibility bookkeeping (:mod:`broker.pop.service`), and the revive loop that redelivers what was not
acknowledged in time (:mod:`broker.pop.revive`). See docs/grpc.md#pop-consumption and
docs/grpc.md#pop-over-remoting.
"""

from broker.pop.receipt import ReceiptHandle
from broker.pop.service import AckOutcome, Popped, PopService

__all__ = ["AckOutcome", "PopService", "Popped", "ReceiptHandle"]
