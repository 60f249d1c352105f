import './base.css';
import './metrics.css';
